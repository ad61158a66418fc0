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


def record(method: str, seed: int, machine: str, clients: int = 10) -> SimpleNamespace:
    return SimpleNamespace(config={"algorithm": method, "data": {"num_clients": clients}, "seed": seed, "rounds": 50},
                           environment={"device_name": machine})


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
