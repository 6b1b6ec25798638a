"""The entailment probe kind (docs/entailment.md): questionnaire items as premise/hypothesis pairs."""
