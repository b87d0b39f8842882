"""The benchmark harness and the data pipeline calibration shares with it.

Heavy dependencies (matplotlib, pytrec_eval, torch via MiniLM) are imported only
where they are used; install them with the ``bench`` extra.
"""
