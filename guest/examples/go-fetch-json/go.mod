module go-fetch-json

go 1.24
