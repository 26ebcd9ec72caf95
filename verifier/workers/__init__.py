"""The processes of a verification and how they talk: pools, the JSON-line channel, the candidate's harness, job directories."""
