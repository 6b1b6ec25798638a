"""The Likert questionnaire probe (the paper's QCLM, method.md sections 1-5, 7)."""

#: the kind's name (qclm.probes.KINDS registers it under this name)
LIKERT = "likert"
