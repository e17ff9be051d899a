"""The judge: the hidden tests collected and run against a ``RemoteSubmission``, each outcome turned into a
test result with a typed cause."""
