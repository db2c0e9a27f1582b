"""One reader per data source: per-site CSV / Excel files (`csv_sites`), the real datasets' published
layouts (`heart`, `har`, `vehicle`), image archives and folders (`images`), and the declared-synthetic
demo federations (`demo`, `synthetic_images`). Read through `mapping`, `alignment`, `assembly`,
`tables`."""
