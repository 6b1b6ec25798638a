"""qclm: questionnaire measurement of psychological constructs in causal language models.

Modules, following the stages of the method (docs/method.md):

- ``questionnaire``: item templates, construct terms, Likert intensifiers (section 1)
- ``stimuli``: stress and neutral narratives (section 2)
- ``models``: the model table, embedded GGUF models, safe loading
- ``engine``: scoring variants as token log-probabilities (section 3)
- ``scoring``: harmonic mean, two-way normalization, item and questionnaire scores (sections 3-5, 7)
- ``analysis``: z-scores, tests, variance decomposition, validation, figures (sections 6-8)
"""

__version__ = "0.1.0"
