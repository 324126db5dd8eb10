"""The GitHub side of the check: one small REST client and what the CLI and the Action do with it.

`_client` talks to the API and trusts nothing it answers (every body is checked for the
fields the caller needs; pagination is bounded); `_names` checks the names we send
(logins, OWNER/NAME, tags, shas); `_comment` keeps the sticky pull-request comment;
`_git` runs git with a token given through the environment, never argv; `_pull` commits,
pushes and opens the regeneration pull request. Both `fairness.action` and `fairness.cli`
import these modules directly; nothing here imports either of them.
"""
