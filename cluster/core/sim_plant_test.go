package core

// plantedBugs are the bugs the simulator plants by name (simOptions.planted).
var plantedBugs = map[string]bug{
	"no-epoch-bump":                  bugNoSucceed,
	"low-priority-stays":             bugNoDemote,
	"guess-on-unconfirmed-handoff":   bugGuess,
	"promote-before-the-stream-ends": bugNoWait,
	"answers-before-acks":            bugEarly,
	"acquire-ids-ignored":            bugNoIDs,
	"no-waiter-places":               bugNoPlaces,
	"writers-applied-as-readers":     bugAsReaders,
}

// needPlantable skips a test that plants bugs in a build that cannot
// (go test without -tags lockd_plant; make test passes it).
func needPlantable(t interface{ Skip(...any) }) {
	if !plantable {
		t.Skip("planting bugs needs go test -tags lockd_plant, as make test runs it")
	}
}
