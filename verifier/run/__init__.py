"""One verification, its phases in order: start the workers, prepare the reference, build, the trials, the timed rounds, the audits and the gates' evidence."""
