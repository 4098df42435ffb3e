package core

// plantable is whether this build carries the mutations of
// sim_plant_test.go: false here, true in the build of the mutated core,
// which replaces this file.
const plantable = false
