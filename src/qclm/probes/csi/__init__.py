"""The Core Sentiment Inventory probe kind (issue 18; docs/csi.md): implicit sentiment from word-by-word forced
choices between two labels (comedy/tragedy), through log-probabilities, under every condition of the experiment.
Modules: :mod:`.words` (word lists: reading, building), :mod:`.prompts` (the prompts, the shuffles),
:mod:`.kind` (the probe kind), :mod:`.scores` (the math), :mod:`.analysis` (tables, figure, overview)."""
