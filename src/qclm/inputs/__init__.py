"""Reading the files a user edits (YAML, tab-separated tables, text) and checking them against their JSON
Schemas; every problem is a (file, location, problem) triple of :class:`qclm.errors.InputError`, shown as
``FILE: LOCATION: PROBLEM``.

One reader per format (:mod:`qclm.inputs.readers`), used for every file the project reads, probe material included:

- :func:`read_text`: UTF-8 (a byte-order mark at the start is read and dropped), a missing file or a
  directory named as such.
- :func:`read_yaml`: a key given twice in a mapping is an error naming both lines (no last-one-wins);
  aliases may not expand a document beyond :data:`ALIAS_EXPANSION_LIMIT` values nor refer to themselves;
  control characters are located by line and column; nesting too deep for the parser is a problem, not a crash.
- :func:`read_tsv`: a column named twice in the header is an error naming the line and both columns.

And one check per kind of content, applied by every loader of user text:

- :func:`schema_problems` (:mod:`qclm.inputs.schemas`): JSON Schema violations, where a number is expected it must
  be finite (JSON Schema's ``minimum`` lets NaN and infinity through).
- :func:`text_problems` (:mod:`qclm.inputs.text`): every string of a loaded document: no control characters but
  newline and tab, no lone surrogates, and something a reader sees: not only whitespace (but the
  :data:`BLANK_FIELDS`), invisible characters (zero-width spaces, joiners, ...) or combining marks;
  :func:`line_problem` adds, for a text that fills one place in a prompt (a label, an option, a term, a word), one
  line without outer whitespace.
- :func:`document_problems`: both, for a loader in one call (questionnaires, stimuli, probe material).

How a problem shows values and locations is :mod:`qclm.inputs.messages`. Every name is importable from here.
"""

from qclm.inputs.messages import (
    MAX_PROBLEM_CHARS, Locations, char_name, entry_label, entry_labels, labelled_entries, list_strings, show,
)
from qclm.inputs.readers import (
    ALIAS_EXPANSION_LIMIT, by_file, duplicate_column_problems, file_lines, line_column, output_problem, parse_yaml,
    read_text, read_tsv, read_yaml, sha256_file,
)
from qclm.inputs.schemas import (
    CONDITION_MAX, CONDITION_PATTERN, SAFE_NAME_MAX, SAFE_NAME_PATTERN, SAFE_NAME_RULE, SHARED_DEFS, SIZES,
    FiniteValidator, document_problems, is_finite_number, load_schema, safe_name_message, safe_name_problem,
    schema_file_problems, schema_problems, shared_defs, size, typed_field,
)
from qclm.inputs.text import (
    BLANK_FIELDS, SAME_TEXT, check_duplicate_id, duplicate_problems, identity, is_invisible, line_problem,
    surrogate_problem, text_problem, text_problems,
)

__all__ = [
    "ALIAS_EXPANSION_LIMIT", "BLANK_FIELDS", "CONDITION_MAX", "CONDITION_PATTERN", "MAX_PROBLEM_CHARS",
    "SAFE_NAME_MAX",
    "SAFE_NAME_PATTERN", "SAFE_NAME_RULE", "SAME_TEXT", "SHARED_DEFS", "SIZES", "FiniteValidator", "Locations",
    "by_file", "char_name", "check_duplicate_id", "document_problems", "duplicate_column_problems",
    "duplicate_problems", "entry_label", "entry_labels", "file_lines", "identity", "is_finite_number", "is_invisible",
    "labelled_entries", "line_column", "line_problem", "list_strings",
    "load_schema", "output_problem", "parse_yaml", "read_text", "read_tsv", "read_yaml", "safe_name_message",
    "safe_name_problem", "schema_file_problems", "schema_problems", "sha256_file", "shared_defs", "show", "size",
    "surrogate_problem", "text_problem", "text_problems", "typed_field",
]
