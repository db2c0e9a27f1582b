"""The mapping step: the data dictionary that maps each site's export onto the study's columns
(`dictionary`), the rules that read the sites' values (`value_rules`), the suggestions made of them
(`suggestions`) and what the step shows of the tables (`study_view`). Reads `alignment` and
`tables`."""
