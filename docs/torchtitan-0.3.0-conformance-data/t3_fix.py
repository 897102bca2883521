"""T3's proposed fix on top of T1's (variants.fix_t1_t3), on t1_buffer_alias.py's scenario with two workers:

    PYTHONPATH=.venv/overlays/torchtitan:docs/torchtitan-0.3.0-conformance-data \
        python docs/torchtitan-0.3.0-conformance-data/t3_fix.py
"""
import os
import runpy
import sys

import variants

variants.fix_t1_t3()
sys.argv = [sys.argv[0], "released", "2"]   # released: t1_buffer_alias.py adds no patch of its own
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "t1_buffer_alias.py"), run_name="__main__")
