"""``hcl report``: ``reports/report.md``, the run's metrics, baselines, provenance, protocol, parameters and figures.

Sections, each written only when its inputs exist (only the metrics folder is required):

- the run: the dataset as its prepared card describes it (name, source, images per split,
  classes, image shape), whether pretraining read the labels (a supervised sampler, or
  ``positives = labels``), and when, where and with which torch and git commit the encoder was
  trained (its sidecar's ``run`` and ``versions``);
- the metric table, read from ``metrics/knn.json`` and ``metrics/linear.json`` (4 decimals), each
  accuracy with its 95% Wilson interval from the test size the file records, and beside the kNN
  result two baselines computed here with the same kNN settings: the same encoder architecture
  untrained (seeded with the run's seed, embedded with the same eval transform) and the raw
  pixels (flattened, scaled to [0, 1], L2-normalised);
- the evaluation protocol, with the settings those files record;
- the parameter table: the parameters the run read (those of its data's modality, its sampler, its
  dataset and its linear protocol; none it ignores), each holding the value the run recorded
  (pretrain: the encoder's sidecar; prepare: the dataset card; knn, linear: their metrics files' sidecars)
  where there is one;
- figures (PNG, in ``figures/`` beside the report): the training loss and kNN top-1 per epoch
  (HCL Fig. 11) and, for the supervised samplers, H-SCL's Assumption 1 share and four losses
  (H-SCL Figs. 4-5), all from pretrain's dvclive logs; same- vs different-label cosine similarity
  histograms of the test embeddings, of the feature the kNN (else linear) evaluation read (HCL
  Fig. 5); and the hardest negatives of a few test anchors under the run's sampler (HCL Fig. 12),
  which needs the encoder and the prepared images (images only: graphs have no views to show).

Graphs (:mod:`hcl_cli.graph.modality`) go through the same sections: the card's graphs, the GIN's
sizes, the SVM protocol's mean and standard deviation over folds, and the summed node features
as the raw baseline.

Every input is read, and every baseline computed, before the first file is written; the report
and its figures are then written as one set under the folder's lock (:mod:`hcl_cli.report.writer`).
Each step lives in :mod:`hcl_cli.report`: inputs, baselines, figures (and their drawing), markdown,
writer.
"""

from __future__ import annotations

from pathlib import Path

from hcl_cli.artifacts import check_outputs_apart, sidecar_path
from hcl_cli.config.report import ReportConfig
from hcl_cli.errors import InputError, shown
from hcl_cli.image.card import CARD_FILE
from hcl_cli.logs import LOG
from hcl_cli.metrics import inputs_path
from hcl_cli.reference import reproduction_note
from hcl_cli.report.baselines import knn_baselines, svm_baseline, untrained_name
from hcl_cli.report.escaping import code
from hcl_cli.report.figures import hard_negative_figure, pretrain_logs, similarity_figure, training_figures
from hcl_cli.report.inputs import METRIC_FILES, Recorded, check_one_run, check_training_log, read_encoder, read_metric_files, read_prepared
from hcl_cli.report.markdown import MetricRow, figure_section, metric_section, protocol_section, run_section, title_line
from hcl_cli.report.parameters import parameter_section
from hcl_cli.report.sentences import sentence_metrics, sentence_report
from hcl_cli.report.writer import FIGURES_FOLDER, publish, report_folder


def check_kind(option: str, path: Path, *, folder: bool) -> None:
    """An input the report may go without (it leaves out what it would show) is still refused when something else is
    there: a FIFO, a device or a folder where a file is expected, a file where a folder is; never a silent skip or a hang."""
    if not path.exists():
        return
    if folder and not path.is_dir():
        raise InputError(f"{option} {shown(path)} is not a folder")
    if not folder and not path.is_file():
        raise InputError(f"{option} {shown(path)} is not a regular file")


def run(config: ReportConfig) -> None:
    """Write ``config.out`` and its figures from whichever inputs exist, once all of them are read."""
    metrics_folder, out = Path(config.metrics), Path(config.out)
    inputs = {
        "--params-file": config.params_file,
        "--metrics": config.metrics,
        "--plots": config.plots,
        "--embeddings": config.embeddings,
        "--data": config.data,
        "--model": config.model,
    }
    check_outputs_apart(inputs, {"--out": out, "--out (its figures)": out.parent / FIGURES_FOLDER})
    for option in ("--params-file", "--embeddings", "--model", "--metrics", "--plots", "--data"):
        if inputs[option]:  # "": none given (--params-file by hand)
            check_kind(option, Path(inputs[option]), folder=option in ("--metrics", "--plots", "--data"))
    with report_folder(out):
        if metrics_folder.is_dir() and (tasks := sentence_metrics(metrics_folder)):
            publish(out, sentence_report(config.title, tasks, config.model if Path(config.model).is_file() else None), {})
            LOG.info(f"hcl report: wrote {out}: SentEval's {', '.join(tasks)}")
            return
        metrics = read_metric_files(metrics_folder)
        prepared = read_prepared(Path(config.data), metrics, metrics_folder) if Path(config.data).is_dir() else None
        encoder = read_encoder(Path(config.model), prepared) if Path(config.model).is_file() else None
        check_one_run(metrics, metrics_folder, prepared, encoder, Path(config.embeddings))
        if config.plots:
            check_training_log(encoder, Path(config.plots), pretrain_logs(Path(config.plots)))
        sources = {name: code(metrics_folder / f"{name}.json", cell=True) for name in metrics}
        recorded = {
            name: Recorded(metrics[name].params, code(inputs_path(metrics_folder / f"{name}.json"), cell=True))
            for name in METRIC_FILES
            if name in metrics
        }
        if prepared is not None:
            card = prepared.card
            recorded["prepare"] = Recorded(
                prepared.modality.recorded_prepare(card) | ({"seed": card.seed} if card.seed is not None else {}),
                code(prepared.folder / CARD_FILE, cell=True),
            )
        if encoder is not None:
            recorded["pretrain"] = Recorded(encoder.config.params(), code(sidecar_path(encoder.path), cell=True))
        recorded["report"] = Recorded(config.params(), "`hcl report` options")

        rows = [
            MetricRow("SVM" if values.params.get("protocol") == "svm" else METRIC_FILES[name][0], "trained", values, sources[name])
            for name, values in metrics.items()
        ]
        if "knn" in metrics and prepared is not None:
            baselines = knn_baselines(metrics["knn"], prepared, encoder)
            rows[1:1] = [MetricRow("kNN (baseline)", name, values, "computed by `hcl report`") for name, values in baselines.items()]
        if "linear" in metrics and metrics["linear"].params.get("protocol") == "svm" and prepared is not None and encoder is not None:
            untrained = svm_baseline(metrics["linear"], prepared, encoder)
            rows.append(MetricRow("SVM (baseline)", untrained_name(encoder), untrained, "computed by `hcl report`"))
        feature = next(iter(metrics.values())).feature
        modality = prepared.modality if prepared is not None else encoder.modality if encoder is not None else None
        drawn = [
            *training_figures(pretrain_logs(Path(config.plots)), modality.sample_noun if modality else "image"),
            *similarity_figure(Path(config.embeddings), feature, modality.sample_noun if modality else "image"),
            *(
                hard_negative_figure(config, prepared, encoder)
                if prepared is not None and encoder is not None and prepared.modality.two_views
                else []
            ),
        ]
        sections = [
            title_line(config.title),
            run_section(prepared, encoder, Path(config.data), Path(config.model)),
            metric_section(rows, encoder, prepared),
            reproduction_note(metrics, {name: stage.values for name, stage in recorded.items()}) or "",
            protocol_section(metrics, encoder, baselines=len(rows) > len(metrics), modality=modality),
            parameter_section(Path(config.params_file), recorded, modality.name if modality else None),
            figure_section(drawn),
        ]
        publish(out, "\n\n".join(section for section in sections if section) + "\n", {figure.file: figure.draw for figure in drawn})
    LOG.info(f"hcl report: wrote {out} with {len(drawn)} figure(s)")
