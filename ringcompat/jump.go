package ringcompat

import "github.com/cespare/xxhash/v2"

// Jump is Lamping and Veach's jump consistent hash: the bucket in
// [0, buckets) of a 64-bit key, using no memory. Growing from n to n+1
// buckets moves a key only into bucket n, but buckets can only be added or
// removed at the end. It returns -1 when buckets <= 0.
func Jump(key uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// JumpString is Jump of xxhash64(key).
func JumpString(key string, buckets int) int {
	return Jump(xxhash.Sum64String(key), buckets)
}
