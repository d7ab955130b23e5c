"""Imported by the bootstrap through SPECCONSOLE_SGLANG_PRELOAD in the spawn test."""

import sys

sys._specconsole_test_preload = {"sglang_imported_before": "sglang" in sys.modules}  # type: ignore[attr-defined]
