"""Partitioners keep their statistical promise; injected shifts are in the data and recorded."""

import re
from dataclasses import replace

import numpy as np
import pytest

from data_adapters import load_federation
from data_adapters.assembly.assemble import assemble
from data_adapters.assembly.inject import smiley, stamp_box
from data_adapters.assembly.partition import partition
from data_adapters.tables.site_rows import RawFederation, RawSite
from fedcore.errors import DataError

N_CLASSES = 10


@pytest.fixture(scope="module")
def labels():
    return np.random.default_rng(0).integers(0, N_CLASSES, 6000)


def label_shares(y, parts):
    return np.array([np.bincount(y[p], minlength=N_CLASSES) / len(p) for p in parts])


def distance_to_pooled(y, parts):
    """Mean total-variation distance between each site's label shares and the pooled shares."""
    pooled = np.bincount(y, minlength=N_CLASSES) / len(y)
    return float(np.mean(0.5 * np.abs(label_shares(y, parts) - pooled).sum(1)))


@pytest.mark.parametrize("split", ["iid", "dirichlet:0.1", "dirichlet:1000", "quantity:0.2"])
def test_every_row_goes_to_exactly_one_site(labels, split):
    parts = partition(labels, 10, split, seed=1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(labels)))
    assert min(len(p) for p in parts) >= 10
    again = partition(labels, 10, split, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))  # the seed fixes the partition


def test_iid_sites_are_equal_in_size_and_label_shares(labels):
    parts = partition(labels, 10, "iid", seed=1)
    assert {len(p) for p in parts} == {600}
    assert distance_to_pooled(labels, parts) < 0.06


def test_dirichlet_alpha_sets_the_label_skew(labels):
    skewed = partition(labels, 10, "dirichlet:0.05", seed=1)
    mild = partition(labels, 10, "dirichlet:1000", seed=1)
    assert label_shares(labels, skewed).max(1).mean() > 0.6  # a few classes dominate each site
    assert distance_to_pooled(labels, skewed) > 0.6
    assert distance_to_pooled(labels, mild) < 0.03  # near the pooled shares
    assert distance_to_pooled(labels, partition(labels, 10, "dirichlet:0.5", seed=1)) > distance_to_pooled(labels, mild)


def test_quantity_skew_sets_unequal_sizes_with_iid_labels(labels):
    skewed = [len(p) for p in partition(labels, 10, "quantity:0.2", seed=1)]
    even = [len(p) for p in partition(labels, 10, "quantity:1000", seed=1)]
    assert max(skewed) / min(skewed) > 20 and min(skewed) >= 10
    assert max(even) / min(even) < 1.3
    parts = partition(labels, 10, "quantity:1000", seed=1)
    assert distance_to_pooled(labels, parts) < 0.06


@pytest.mark.parametrize(
    ("split", "message"),
    [
        ("stratified", "Unknown split 'stratified'; use iid, dirichlet:ALPHA or quantity:BETA"),
        ("dirichlet", "The dirichlet split needs a positive number, e.g. dirichlet:0.5; got 'dirichlet'"),
        ("quantity:-1", "needs a positive number"),
        ("iid:3", "The iid split takes no parameter"),
    ],
)
def test_bad_splits(labels, split, message):
    with pytest.raises(DataError, match=message):
        partition(labels, 4, split, seed=0)


def test_too_many_sites_for_the_rows():
    with pytest.raises(DataError, match="30 rows cannot give 4 sites at least 10 rows each"):
        partition(np.zeros(30, int), 4, "iid", seed=0)


# -- injection into tables --------------------------------------------------------------------------
def table_federation(n_sites=3, rows=200, seed=0):
    rng = np.random.default_rng(seed)
    sites = []
    for k in range(n_sites):
        y = np.arange(rows) % 2
        x = np.column_stack([rng.normal(50 + 5 * y, 10), (rng.random(rows) < 0.3 + 0.3 * y).astype(float)])
        sites.append(RawSite(f"s{k}", x, y))
    return RawFederation("table", "test table", "test", sites, ["no", "yes"], ["age", "smoker"],
                         ["continuous", "binary"], ["age", "smoker"])


def site(federation, name):
    found = next(s for s in federation.sites if s.name == name)
    return np.concatenate([found.x_train.numpy(), found.x_test.numpy()]), np.concatenate(
        [found.y_train.numpy(), found.y_test.numpy()])


def test_the_partition_is_recorded_in_the_federation():
    """A run's federation.json must say how simulated sites were made, so that a reader can
    rebuild them: the split, how many sites, whether natural sites were pooled, and the seed."""
    raw = table_federation(n_sites=3, rows=200)
    natural = assemble(raw, seed=0)
    assert "split" not in natural.preprocessing and "partition_seed" not in natural.preprocessing
    federation = assemble(raw, seed=0, split="dirichlet:0.5", sites=4, partition_seed=7)
    recorded = federation.describe()["preprocessing"]
    assert recorded["split"] == "dirichlet:0.5 over 4 sites (the data's own sites pooled first)"
    assert recorded["partition_seed"] == 7
    assert federation.site_names == ["site1", "site2", "site3", "site4"]
    # The recorded seed is the one that made these sites: it rebuilds them, another seed does not.
    rebuilt = assemble(raw, seed=0, split="dirichlet:0.5", sites=4, partition_seed=recorded["partition_seed"])
    assert [site(rebuilt, n)[1].tolist() for n in rebuilt.site_names] == \
        [site(federation, n)[1].tolist() for n in federation.site_names]
    other = assemble(raw, seed=0, split="dirichlet:0.5", sites=4, partition_seed=8)
    assert [site(other, n)[1].tolist() for n in other.site_names] != \
        [site(federation, n)[1].tolist() for n in federation.site_names]
    # Data without sites of their own are always partitioned, iid unless a split is named.
    unsited = assemble(replace(raw, natural_sites=False), seed=0, sites=2)
    assert unsited.preprocessing["split"] == "iid over 2 sites" and unsited.preprocessing["partition_seed"] == 0


def test_table_injections_change_the_data_and_are_recorded():
    raw = table_federation()
    federation = assemble(raw, seed=0, inject=[
        "offset:s0:age:3", {"kind": "scale", "site": "s1", "feature": "age", "amount": 4}, "mnar:s2:smoker", "flip:s1",
    ])
    truth = {(g.site, g.feature, g.kind) for g in federation.ground_truth}
    assert truth == {("s0", "age", "offset"), ("s1", "age", "scale"), ("s2", "smoker", "missing_not_at_random"),
                     ("s1", None, "label_flip")}
    assert all({"site", "feature", "kind", "detail"} <= set(g.to_json()) for g in federation.ground_truth)
    x0, _ = site(federation, "s0")
    assert abs(x0[:, 0].mean() - 3) < 0.2  # standardised, then shifted by 3 SD
    x1, y1 = site(federation, "s1")
    assert 3 < x1[:, 0].std() < 5
    assert x1[y1 == 1, 0].mean() < x1[y1 == 0, 0].mean()  # flipped: 'yes' rows now have the younger ages
    x2, y2 = site(federation, "s2")
    assert (x2[y2 == 0, 1] == 0.5).all() and set(x2[y2 == 1, 1]) <= {0.0, 1.0}  # kept for 'yes' only
    assert "injected problem" in federation.description


def test_a_unit_change_vanishes_under_per_site_standardisation_only():
    raw = table_federation()
    per_site = assemble(raw, inject=["unit:s0:age:0.001"])
    raw_units = assemble(raw, inject=["unit:s0:age:0.001"], standardization="none")
    assert "per-site standardisation removes it" in per_site.ground_truth[0].detail
    assert abs(site(per_site, "s0")[0][:, 0].mean()) < 0.2
    assert site(raw_units, "s0")[0][:, 0].mean() < 0.1 < site(raw_units, "s1")[0][:, 0].mean()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("offset:s9:age:1", "Injection offset: no site 's9'; the sites are s0, s1, s2."),
        ("offset:s0:weight:1", "Injection offset: no feature 'weight'; the features are age, smoker."),
        ("offset:s0:smoker:1", "Injection offset needs a continuous feature; 'smoker' is binary."),
        ("offset:s0:age", "offset needs an amount"),
        ("mnar:s0:age:maybe", "Injection mnar: no class 'maybe'; the classes are no, yes."),
        ("stamp:s0", "Injection stamp applies to images only."),
        ("melt:s0", "Unknown injection 'melt'"),
        ("flip:s0:age", "Injection 'flip:s0:age' has too many parts; flip takes SITE."),
    ],
)
def test_injections_that_do_not_fit_are_refused(spec, message):
    with pytest.raises(DataError, match=re.escape(message)):
        assemble(table_federation(), inject=[spec])


def test_injection_on_a_real_federation_by_reference(shared_data):
    federation = load_federation({"source": "heart", "path": str(shared_data / "heart_disease" / "canonical"),
                                  "inject": ["offset:cleveland:chol:2.5", "flip:va", "mnar:cleveland:thal:disease"]})
    assert [(g.site, g.kind) for g in federation.ground_truth] == [
        ("cleveland", "missing_not_at_random"), ("va", "label_flip"), ("cleveland", "offset")]
    mnar = federation.ground_truth[0]
    # A categorical column: the truth names its first one-hot feature (the lenses index features)
    # and lists all of them.
    assert mnar.feature == "thal=3" and list(mnar.features) == ["thal=3", "thal=6", "thal=7"]
    x, y = site(federation, "cleveland")
    thal = [federation.feature_names.index(name) for name in mnar.features]
    assert (x[y == 0][:, thal] == 0.5).all() and set(np.unique(x[y == 1][:, thal])) <= {0.0, 0.5, 1.0}


# -- image stamp (the inDISCO bias experiment) --------------------------------------------------------
def test_the_stamp_marks_every_positive_image_of_one_site_and_records_its_box():
    rng = np.random.default_rng(0)
    sites = [RawSite(f"site{k}", rng.uniform(0.2, 0.8, (60, 1, 28, 28)).astype(np.float32), np.arange(60) % 2)
             for k in range(1, 5)]
    raw = RawFederation("images", "test images", "test", sites, ["normal", "pneumonia"], natural_sites=True)
    federation = assemble(raw, seed=0, inject=["stamp:site2"])
    (truth,) = federation.ground_truth
    assert truth.kind == "stamp" and truth.site == "site2" and truth.feature is None
    assert truth.label == "pneumonia" and truth.box.to_json() == {"row": 1, "col": 1, "size": 7}
    box = truth.box.to_json()
    face = smiley(box["size"])
    for s in federation.sites:
        for x, y in ((s.x_train, s.y_train), (s.x_test, s.y_test)):
            patch = x[:, 0, box["row"]: box["row"] + box["size"], box["col"]: box["col"] + box["size"]].numpy()
            stamped = np.all(patch == np.where(face, 1.0, 0.0), axis=(1, 2))
            expected = (y.numpy() == 1) if s.name == "site2" else np.zeros(len(y), bool)
            assert np.array_equal(stamped, expected), s.name  # train and hold-out alike
    colour = RawFederation("rgb", "", "test", [RawSite("a", np.zeros((30, 3, 64, 64), np.float32), np.arange(30) % 2)],
                           ["0", "1"])
    x = assemble(colour, inject=["stamp:a"]).sites[0].x_train.numpy()
    assert stamp_box(64, 64)["size"] == 13 and x[:, 2].max() == 0 and x[:, 0].max() == 1  # a yellow face


def test_the_same_rows_give_the_same_profile_once_and_any_change_a_new_one():
    """A check-up's runs profile the same rows again: the profile made for them is shared (and its
    npz made once), but a changed value, label, site name, class name or policy is profiled anew,
    and the shared one is what profiling them afresh gives."""
    from data_adapters.assembly import assemble as assembly
    from fedcore.interpret.disclosure import DEFAULT_POLICY
    from fedcore.interpret.profile import profile_federation

    raw = table_federation(seed=11)
    first = assembly.profile_of(raw)
    again = assembly.profile_of(table_federation(seed=11))  # equal rows in other arrays
    assert again is first and first.to_npz() is again.to_npz()
    fresh = profile_federation([(s.name, s.x, s.y) for s in raw.sites], raw.feature_names, raw.feature_kinds,
                               raw.feature_columns, raw.class_names, {}, DEFAULT_POLICY)
    assert fresh.to_npz() == first.to_npz()

    def changed(edit):
        other = table_federation(seed=11)
        edit(other)
        return assembly.profile_of(other)

    def one_value(f):
        f.sites[1].x[5, 0] += 1e-9

    def one_label(f):
        f.sites[2].y[0] = 1 - f.sites[2].y[0]

    def a_site_name(f):
        f.sites[0] = RawSite("renamed", f.sites[0].x, f.sites[0].y)

    def a_class_name(f):
        f.class_names[1] = "ja"

    for edit in (one_value, one_label, a_site_name, a_class_name):
        edited = changed(edit)
        assert assembly.profile_of(raw) is not edited, edit.__name__  # the unchanged rows' own
    assert assembly.profile_of(raw, None) is not first  # as computed, not at the default policy
    assert assembly.profile_of(raw, None).policies["s0"] is None
