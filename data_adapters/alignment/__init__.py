"""The sites' tables as one study: which columns every site has and how each is typed (`align`),
duplicated sites, target labels that cannot be one set of classes, the server's own test table,
unit-like differences the check-up finds, and the alignment report as text (`report_text`,
`summary`). Reads `tables`."""
