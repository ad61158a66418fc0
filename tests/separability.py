"""The separability check of every method's own tests: it lives in the package now
(:func:`fedkd_core.conformance.assert_clients_separable`, part of ``conformance.check``)."""

from fedkd_core.conformance import SELECTIONS, assert_clients_separable, separated_run  # noqa: F401
