"""Moved to :mod:`fedkd_core.algorithms.shapes.schedule`, beside the transfer-set round it schedules.

This old name remains only for the KnFu chapter's modules (``chapters/knfu.py``,
``chapters/knfu_tuning.py``) and ``tests/test_schedule.py``, which move to the new path with the
KnFu chapter's split; delete this file then. It is the same module object, not a copy.
"""

import sys

from .shapes import schedule

sys.modules[__name__] = schedule
