"""Which machines compute alike, measured from reruns, and whether records pair runs of machines
that do not: the verdicts widen their intervals only then."""

from types import SimpleNamespace

from fedkd_core import numerics


def rerun(stored_on: str, rerun_on: str, delta: float = 0.0, stored_in: str = "fp32", rerun_in: str = "fp32") -> dict:
    return {"stored_on": stored_on, "stored_in": stored_in, "rerun_on": rerun_on, "rerun_in": rerun_in,
            "alma_delta": delta, "global_acc_delta": None}


def test_machines_agree_only_on_enough_identical_fp32_reruns():
    identical = [rerun("zen4", "zen5")] * 3
    assert numerics.agreeing_machines(identical) == [("zen4", "zen5")]
    assert numerics.agreeing_machines(identical[:2]) == []  # too few to say
    assert numerics.agreeing_machines(identical + [rerun("zen5", "zen4", 0.01)]) == []  # one differs: not alike
    assert numerics.agreeing_machines([rerun("zen4", "zen5", rerun_in="bf16")] * 3) == []  # bf16 says nothing
    assert numerics.agreeing_machines([rerun("zen4", "zen4")] * 3) == []  # the same machine: a determinism check


def test_agreement_is_transitive_and_an_unmeasured_machine_is_its_own_class():
    classes = numerics.numerics_classes({"avx2", "zen4", "zen5", "xeon"}, [("zen4", "zen5"), ("xeon", "zen5")])
    assert classes["zen4"] == classes["zen5"] == classes["xeon"] != classes["avx2"]


def record(method: str, seed: int, machine: str, clients: int = 10, precision: str = "fp32", **data) -> SimpleNamespace:
    return SimpleNamespace(config={"algorithm": method, "data": {"num_clients": clients, **data}, "seed": seed,
                                   "rounds": 50, "train": {}},
                           environment={"device_name": machine, "precision": precision})


def test_records_mix_numerics_where_a_cell_and_seed_pairs_runs_of_machines_not_shown_alike():
    classes = numerics.numerics_classes({"avx2", "zen4", "zen5"}, [("zen4", "zen5")])
    split_seed = [record("fedavg", 1, "zen4"), record("fedgmkd", 1, "zen5")]  # one seed over two machines
    assert not numerics.mixes_numerics(split_seed, classes)  # that compute alike
    across = [record("fedavg", 1, "avx2"), record("fedgmkd", 1, "zen5"), record("fedavg", 0, "avx2"),
              record("fedgmkd", 0, "avx2")]
    assert numerics.mixed_pairings(across, classes) == 1 and numerics.mixes_numerics(across, classes)
    by_seed = [record("fedavg", 0, "avx2"), record("fedgmkd", 0, "avx2"), record("fedavg", 1, "zen5"),
               record("fedgmkd", 1, "zen5")]  # each seed on one machine: its effect holds no drift
    assert not numerics.mixes_numerics(by_seed, classes)
    assert not numerics.mixes_numerics([("c1", "A", 0, 0.5)], classes)  # not run records: no machine


def test_the_committed_reruns_show_zen_4_and_zen_5_compute_alike_and_the_avx2_epyc_not():
    """The measured files under benchmarks/results/ decide, not the CPUs' names."""
    pairs = numerics.rerun_pairs()
    zen4, zen5 = "AMD EPYC (family 25 model 17, AVX512-BF16)", "AMD EPYC (family 26 model 2, AVX512-BF16)"
    assert (zen4, zen5) in numerics.agreeing_machines(pairs)
    assert all("AMD EPYC" != machine for machines in numerics.agreeing_machines(pairs) for machine in machines)


def test_runs_of_one_cell_pair_whatever_fields_were_added_since_and_other_cells_do_not():
    """A record made before ``validation_fraction`` existed pairs with a newer one that stores its
    original value 0.0 (the same run to ``results.outcome_fields``); another client count does not."""
    classes = numerics.numerics_classes({"avx2", "zen4"}, [])
    old_and_new = [record("fedavg", 0, "avx2"), record("fedprox", 0, "zen4", validation_fraction=0.0)]
    assert numerics.mixes_numerics(old_and_new, classes)
    other_cell = [record("fedavg", 0, "avx2"), record("fedprox", 0, "zen4", clients=20)]
    assert not numerics.mixes_numerics(other_cell, classes)


def test_runs_in_another_precision_never_count_as_alike():
    classes = numerics.numerics_classes({"zen4", "zen5"}, [("zen4", "zen5")])
    assert numerics.mixes_numerics([record("fedavg", 0, "zen4"), record("knfu", 0, "zen5", precision="bf16")], classes)


def test_one_record_rerun_three_times_is_one_record_and_a_rerun_comparing_nothing_says_nothing():
    thrice = [{**rerun("zen4", "zen5"), "record": "abc"}] * 3
    assert numerics.agreeing_machines(thrice) == []
    blank = [{**rerun("zen4", "zen5", delta=None), "record": "x"}]
    spread = [{**rerun("zen4", "zen5"), "record": name} for name in "abc"]
    assert numerics.agreeing_machines(spread + blank) == [("zen4", "zen5")]
