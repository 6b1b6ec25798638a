# The analysis of every probe kind besides the Likert questionnaire (whose analysis is analysis.smk): each kind's
# own tables and figures from its score tables (qclm.probes.base.ProbeKind.analyze), under the run's contrasts and
# analysis settings.

PROBE_ANALYSIS_CONFIG = {
    key: config[key] for key in ("stimuli", "conditions", "contrasts", "analysis") if key in config
}
PROBE_ANALYSIS_TARGETS = []

for _kind in KINDS:
    if _kind == probes.LIKERT:
        continue
    _cls = probes.kind_class(_kind)
    _files = [f"{RESULTS}/analysis/{f}" for f in _cls.analysis_files()]
    if not _files:
        continue
    PROBE_ANALYSIS_TARGETS += _files

    rule:
        name:
            f"analyze_{_kind}"
        conda:
            "../../environment.yml"
        input:
            **{f"table_{name}": f"{SCORES}/{path}" for name, path in _cls.score_tables.items()},
        output:
            _files,
        params:
            kind=_kind,
            out=f"{RESULTS}/analysis",
            config=PROBE_ANALYSIS_CONFIG,
        log:
            f"{LOGS}/analyze_{_kind}.log",
        script:
            "../scripts/analyze_probe.py"
