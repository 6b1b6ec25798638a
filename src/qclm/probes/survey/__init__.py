"""The generated-survey probe kind (R.U.Psycho-style, issue 19): :mod:`.kind` (requests and scoring),
:mod:`.material` (the prompts), :mod:`.judge` (cleaning, the validator, the rule-based judge), :mod:`.tables` (the CPU
tables) and :mod:`.analysis` (summary, agreement, figures, the overview fragment). docs/survey.md."""
