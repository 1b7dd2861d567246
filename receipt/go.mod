module github.com/verifierd/verifierd/receipt

go 1.26.8
