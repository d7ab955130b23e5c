"""Installs the tp rig's faults (``tp_faults.py``) in a server process on a GPU (test rig
only). scripts/gpu-check's GPU launch names this module in ``SPECCONSOLE_SGLANG_PRELOAD``
(the patch's bootstrap imports it in every process) together with
``SPECCONSOLE_RIG_TP_FAULTS``; on the CPU rig ``preload.py`` installs them itself. Nothing
of the CPU rig (stand-in operators, libcuda) is loaded here."""

from tests.real_sglang.rig import tp_faults

tp_faults.install()
