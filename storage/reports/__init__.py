"""Read-only reports as data: verify, describe, diff, doctor, groups, transactions, file dumps."""
