package proxy

import "time"

// exchange is what a session keeps of the command it is serving: where
// the response comes from and how it is relayed, the state of that relay,
// and what the command's end does (locks given back, DDL announced,
// GTIDs shared, the client's session tracking read again). Only the
// session's own goroutine touches it.
type exchange struct {
	// rowCharge is what a large row held for a capture takes of the
	// session's memory budget until the command ends (passRow,
	// shrinkBuffers).
	rowCharge int64
	src       *backendConn // the connection whose response is being relayed
	form      resultForm   // how writeResult answers the current command
	// Per-response relay state.
	lastOK          bool   // the last response ended in OK/EOF, not ERR
	midResponse     bool   // part of a response has been written to the client
	eofAfterColumns uint16 // status of the EOF that followed column definitions
	// processlist, while SHOW PROCESSLIST's answer is relayed, maps
	// backend thread ids to session ids (processlist.go); inRows: rows
	// are being relayed.
	processlist map[uint64]uint32
	inRows      bool
	trackBuf    []byte // an OK or EOF without its session state (session.tracked)
	stateBuf    []byte // the session state the client's tracking keeps (session.tracked)
	okCopy      []byte // an OK kept while the client's tracking is read (session.tracked)
	// moreFollows: the response being written is to a piece of a text
	// lockproxy runs in pieces, and more pieces follow (querySplit).
	moreFollows bool
	moreBuf     []byte
	splitPieces int // depth of querySplit: the pieces of the text so far
	// cmdSeq is the sequence id of the last packet of the command being
	// served: 0 but for a command of 16 MiB or more, which comes in
	// several packets. An answer's first packet follows it.
	cmdSeq byte
	// releaseEarly: the statement being relayed was sent as the client
	// sent it, so the locks its end frees (afterCommand) are given back
	// once the backend's last packet is read, before the client's copy is
	// flushed: the next holder of a hot row does not wait on this client's
	// socket.
	releaseEarly bool
	// noneRan: the response being relayed began with ERR, so no part of
	// the command ran (a later statement of a text runs only after the
	// earlier ones succeeded).
	noneRan bool
	// giveBack is what the statement being served may give back of the
	// transaction's locks when it ends (afterCommand).
	giveBack giveBack
	// raised: the response being relayed reported a warning.
	raised bool
	// ddlWord: the statement being relayed is DDL the other instances
	// sharing the lock service must hear of; relay announces it once the
	// backend answered OK, before the client's copy is flushed
	// (ddlAnnounced then tells refreshSchemaAsync it was done).
	ddlWord, ddlAnnounced bool
	// shareOnEnd: the statement being relayed may write, and its GTID is
	// to be shared before the client has its answer (shareWrites).
	shareOnEnd bool
	// sharedGTID: shareWrites learnt the GTID of the statement served.
	sharedGTID bool
	// cap is the capture of the result being relayed, rw the guarded
	// UPDATE being served (nil for any other command: a pointer keeps the
	// session, which every idle connection holds, small) and rwConflict
	// whether it lost its race.
	cap        *capture
	rw         *rewriteStep
	rwConflict bool
	// lastReport: what the server's report at the end of the command's
	// last result named (sessiontrack.go), for confirmed.
	lastReport reportBits
	// trackText: the command's text names session_track; trackChanged:
	// a report named a tracking variable. Either has the client's
	// tracking read again (session.retrack).
	trackText, trackChanged bool
	// waitTimeout is the session's wait_timeout a report of the command
	// named (waitReported), for a multiplexing session's idle limit.
	waitTimeout  time.Duration
	waitReported bool
}
