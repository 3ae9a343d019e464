// Package host reads what the benchmark commands record about the machine
// they ran on, for their reports: the load averages, which on a shared
// machine say how much the figures beside them can be trusted.
//
//	fmt.Printf("load average %s\n", host.LoadAverages()) // "0.52 0.61 0.70"
package host
