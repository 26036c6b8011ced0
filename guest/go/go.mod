module glovebox/guest

go 1.24
