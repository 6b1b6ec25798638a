"""The Likert questionnaire probe (the paper's QCLM, method.md sections 1-5, 7)."""
