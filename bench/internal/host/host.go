package host

import (
	"os"
	"strings"
)

// LoadAverages returns the 1-, 5- and 15-minute load averages as
// /proc/loadavg writes them, or "unknown" where there is none.
func LoadAverages() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
