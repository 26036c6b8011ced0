module echo

go 1.24
