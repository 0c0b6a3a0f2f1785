"""The hostile suite: ``hcl`` run as a careless user or script would, each case in its own copy of a tiny pipeline.

A case (:class:`~.harness.Case`) is the ``hcl`` arguments, the exit codes that are right and what
else must hold; :mod:`.harness` runs it and judges the answer, :mod:`.setups`, :mod:`.checks` and
:mod:`.runs` are the pieces cases are made of. Every module here named ``cases_*.py`` defines one
list, ``CASES``, of one theme; ``test_hostile.py`` collects every such module, so a new theme is a
new module and nothing else. The suite is slow (several seconds a case): its tests carry the
``hostile`` and ``slow`` marks and run only when asked, ``pytest -m hostile``.
"""
