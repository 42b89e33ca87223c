"""The built-in agreement measures, one module per family; each defines ``MEASURE``.

- ``identity``: bitwise identity of two results (of one result: its repeats).
- ``label_agreement``: label agreement (cluster ids matched first).
- ``differences``: max and mean |Δ|, absolute and relative, of continuous outputs.
- ``score_difference``: the difference of the primary score.
- ``deep_learning``: final loss and accuracy differences, and whether all ranks ended equal.

Adding a measure is one module here (or, for a third party, one module registered under the
entry-point group ``accelml.measures``): see :mod:`accelml.agreement.point`.
"""
