// The receipt checker as a module of its own, standard library only
// (make check-modules): the client module and anyone checking a receipt
// offline require it without the daemon's dependencies.
module github.com/verifierd/verifierd/receipt

go 1.26.8
