"""The drafter registry: which target, revision and capture layers each drafter was
trained on, where copies of it live, and what each copy was converted from.

Each submodule is imported by name (`registry.paths` to ask whether a registry exists, `registry.store` to open
one), so that a command pays only for what it uses (issue 16).
"""
