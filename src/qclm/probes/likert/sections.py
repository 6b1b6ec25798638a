"""The config section the Likert kind brings, ``templates`` (which wordings of each questionnaire are scored and
which its scores use: method.md section 1b): its schema is ``config.schema.yaml`` beside this module, merged into
the config schema (:func:`qclm.probes.full_config_schema`) through :attr:`LikertProbe.config_schema`, so it is
validated and documented as the shared sections are, and read with its defaults by ``LikertProbe.section``. Light
(PyYAML and the settings only)."""

from __future__ import annotations

from importlib import resources

import yaml

from qclm.settings import defaults_of

#: the section's name
TEMPLATES = "templates"
#: the sections the kind brings, name -> JSON Schema
SECTIONS: dict[str, dict] = yaml.safe_load(resources.files(__package__).joinpath("config.schema.yaml")
                                           .read_text(encoding="utf-8"))
#: the defaults of ``templates`` (the one home of them: the schema)
TEMPLATE_DEFAULTS = defaults_of(SECTIONS[TEMPLATES])
#: ``templates.select`` values besides a template id: the default (first) wording, or the mean over all
TEMPLATE_SELECTIONS = ("first", "all")
