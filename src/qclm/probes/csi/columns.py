"""The CSI raw table's columns and the story test's settings (light: the kind, its tables and the story test share
them without importing one another)."""

#: the raw table's columns for answers (part ``words`` or ``control``): one row per word x repetition; ``wording``:
#: the instruction's wording (1-based), ``prompt_id``: the question the answer answers (wording, label order, the
#: list's words; :func:`qclm.probes.csi.prompts.prompt_id`): a word's distinct ids are its independent answers
ANSWER_COLUMNS = ["model", "probe", "condition", "stimulus_id", "part", "repetition", "label_order", "wording",
                  "prompt_id", "list_index", "position", "list_size", "word", "pos", "freq_rank", "valence",
                  "label_a", "label_b", "label_other", "logp_a", "logp_b", "logp_other", "p_a", "p_b", "p_other",
                  "choice", "chosen"]
#: and for the story test (part ``story``): one row per story
STORY_COLUMNS = ["story_k", "story_sample", "story_words", "story_pool", "story_text", "story_finish",
                 "rating_expected", "rating_argmax"]
COLUMNS = ANSWER_COLUMNS + STORY_COLUMNS
#: the answer a choice index stands for
CHOICES = ("a", "b", "other")
#: the story test's settings: words per story, the comedy/tragedy pools' minimum size
STORY_WORDS = 5
POOL_MIN = 10
