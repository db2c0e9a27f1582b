"""Vehicle classification in a distributed sensor network (Duarte & Hu 2004), federated by sensor.

Layout: one table (CSV, optionally gzipped) with columns `sensor` (0-22), `y` (-1 / +1) and the
100 features f000…f099, as in `vehicle_ditto_train_by_sensor.csv.gz`. Features are already
z-scored per sensor in that release. The two vehicle classes are named by their labels, -1 and
+1, since the release does not say which vehicle type each is.
"""

from __future__ import annotations

from data_adapters.alignment.align import TableSites
from data_adapters.readers.csv_sites import numbered, split_by_column
from data_adapters.tables.text_tables import read_text_table

MAX_BYTES = 200_000_000
MIN_ROWS = 5  # the smallest sensor has 7 windows; all 23 take part


def read_vehicle(path: str) -> TableSites:
    text = read_text_table(path, MAX_BYTES)
    warnings = list(text.warnings)
    tables = split_by_column(text, "sensor", numbered("sensor"), warnings)
    return TableSites(
        name=f"Vehicle sensor network ({len(tables)} sensors)",
        description="Real acoustic and seismic features of passing vehicles; one site per sensor.",
        source="vehicle",
        tables=tables,
        target="y",
        class_labels={"-1": "-1", "1": "+1"},
        warnings=warnings,
        min_rows=MIN_ROWS,
    )
