"""The two ways a verification stops without a verdict on the candidate's code: the verification
could not run at all (`VerifierError`), or the candidate tampered with its job directory under the
trusted side (`JobTampered`, which the caller turns into an anti-hacking failure). Their own module so
every phase of a run can raise them without importing the run.
"""

from __future__ import annotations


class VerifierError(Exception):
    """The verification could not run at all (bad task, unusable backend); one line saying what to do."""


class JobTampered(OSError):
    """The candidate changed the job directory under the trusted side (swapped a hand-over directory
    for a link, planted a file where an input goes): an anti-hacking failure, never a verifier error."""
