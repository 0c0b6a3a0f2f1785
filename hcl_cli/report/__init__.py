"""``hcl report``'s pieces, one job each; the stage (:mod:`hcl_cli.stages.report`) calls them in order.

- :mod:`~hcl_cli.report.inputs`: every input read and checked (metrics files, prepared dataset, encoder);
- :mod:`~hcl_cli.report.baselines`: the baselines beside the result (kNN of the untrained encoder and of the raw features;
  the untrained encoder's SVM readout when the run's protocol is svm);
- :mod:`~hcl_cli.report.figures`: which figures the inputs allow, with their captions;
- :mod:`~hcl_cli.report.plots`: the drawing (matplotlib);
- :mod:`~hcl_cli.report.markdown`: the report's sections, every outside string escaped;
- :mod:`~hcl_cli.report.writer`: the report and its figures written as one set, under the folder's lock;
- :mod:`~hcl_cli.report.sweep`: ``hcl compare``'s table of a sweep (:mod:`hcl_cli.stages.compare` reads the experiments).
"""
