"""AI assist through the Anthropic API: advisory only (docs/assist.md).

- `claims`: for attempts whose expected level the rules could not read, a model reads the agent's
  words and returns the ladder level it expected, whether it claimed success and the sentence
  that says so. Stored as model-extracted; a reviewer accepts or corrects it, and only then does
  it count (`storage.queries.effective_expected_level`).
- `brief`: for one attempt, a short explanation, a suspected cause from the failure taxonomy with
  the log lines it rests on, and a next step. Never changes a verdict, a cause or a count.

`client.Assistant` makes every call: inputs redacted, answers cached in the study database by a
hash of the exact request, tokens and dollars recorded per call in `llm_call`. The `anthropic`
package is imported only when a call is really made.
"""
