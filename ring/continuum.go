package ring

import "slices"

// continuum is a sorted circle of points, each owned by a node.
type continuum struct {
	points []uint32
	owner  []int32
}

type point struct {
	v     uint32
	owner int32
}

// build sorts pts by value. Equal values keep their insertion order
// (the peers sort unstably; a collision among 32-bit points is rare and
// only then could an arc change hands).
func build(pts []point) continuum {
	slices.SortStableFunc(pts, func(x, y point) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	c := continuum{points: make([]uint32, len(pts)), owner: make([]int32, len(pts))}
	for i, p := range pts {
		c.points[i], c.owner[i] = p.v, p.owner
	}
	return c
}

// ceil returns the owner of the first point at or after h, wrapping to the
// first point (libmemcached, twemproxy).
func (c *continuum) ceil(h uint32) int {
	i, _ := slices.BinarySearch(c.points, h)
	if i == len(c.points) {
		i = 0
	}
	return int(c.owner[i])
}

// floor returns the owner of the last point at or before h, wrapping to the
// last point (dalli, redis-rb). Among equal points it takes the last one.
func (c *continuum) floor(h uint32) int {
	i := len(c.points) // every point is <= the largest hash
	if h != ^uint32(0) {
		i, _ = slices.BinarySearch(c.points, h+1)
	}
	if i == 0 {
		i = len(c.points)
	}
	return int(c.owner[i-1])
}
