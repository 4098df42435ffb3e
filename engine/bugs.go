package engine

// bug is a bug the model tests plant in an engine (Engine.planted), to
// show that they find it (bugs_test.go). Outside those tests no engine
// has one, and each check is a load of a field that is 0.
type bug uint8

const (
	bugReadersOvertake    bug = 1 << iota // a reader passes the writers that wait, as in a reader-preferring lock
	bugReaderBesideWriter                 // a reader is admitted beside a writer that holds
	bugSetGrantedEarly                    // a set is granted when all but one of its keys admit it
	bugNoSettleOnLeave                    // a waiter that leaves lets nobody through
)
