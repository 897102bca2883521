"""T3's partial fix (variants.t3_partial, an experiment: T3 has no diff) on top of T1's diff, on t1_buffer_alias.py's
scenario with two workers, in a process that imports torchtitan with T1.diff applied (a copy made by
properties.targets.patched, the overlay next):

    PYTHONPATH=$(python -c 'from studies.torchtitan.fixes import FIXES as P; \
        print(":".join(P.import_path(P.build(["T1"]))))'):.:docs/torchtitan-0.3.0-conformance-data \
        python studies/torchtitan/data/t3_fix.py

(t3_fix.txt was recorded on 2026-12-03 with T1's fix as a monkeypatch of state_dict, the same change as T1.diff.)
"""
import os
import runpy
import sys

import variants

variants.t3_partial()
sys.argv = [sys.argv[0], "released", "2"]   # released: t1_buffer_alias.py adds no monkeypatch of its own
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "t1_buffer_alias.py"), run_name="__main__")
