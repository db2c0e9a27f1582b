"""One site's table: a delimited text file or an Excel workbook read with a message for every way
it can fail (`text_tables`, `workbooks`), its cells as labels (`cells`), its columns as numbers or
text (`columns`), what a column's name says whatever its spelling (`names`), and the rows every
reader hands on to the assembly (`site_rows`). The bottom of the data adapters: imports no other
sub-package."""
