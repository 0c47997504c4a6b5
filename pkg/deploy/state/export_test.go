package state

// SetHeadsPage makes a LIST of heads read n per request, until the function
// it returns is called.
func SetHeadsPage(n int64) (restore func()) {
	old := headsPage
	headsPage = n
	return func() { headsPage = old }
}
