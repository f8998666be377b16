// A news ticker: white text on a dark bar, scrolling right to left for ever. It fills its
// parent (a zone's box), and sizes its text and its speed by its height.
//
// `ticker` (zoneitems.py's Ticker) gives the text of one loop (its lines joined by bullets)
// and the speed in px/s for a bar 108 px high. The strip is a queue of segments, each the
// whole text once: the first leaves on the left while more are added on the right, beyond
// the bar's edge, so the loop has no seam. A new text is used by the segments added after it
// comes: it scrolls in from the right, after what is on screen, without a jump.
//
// The strip moves in a FrameAnimation: once per frame, advanced by the scene graph's
// animation driver at the display's refresh rate, by the time that frame took.
pragma ComponentBehavior: Bound
import QtQuick

Rectangle {
    id: bar

    // A Python object (zoneitems.Ticker): `var`, as QML cannot see its type.
    required property var ticker
    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    readonly property real textSize: Math.max(8, Math.round(height * 0.55))
    readonly property real pixelsPerSecond: ticker.speed * height / 108
    // Where the strip's first segment starts (0 at the bar's left edge, then negative).
    property real offset: 0
    // The width of all segments in the strip.
    property real filled: 0
    // The window, once the strip holds text in it: the ticker is then laid out (painted two
    // frames later: zoneitems.py).
    readonly property var shownIn: segments.count > 0 ? bar.Window.window : null

    anchors.fill: parent
    color: "#141414"
    clip: true

    ListModel { id: segments }
    Fade { id: fader; target: bar }

    Row {
        id: strip
        objectName: "strip"
        x: bar.offset
        anchors.verticalCenter: parent.verticalCenter
        Repeater {
            id: repeater
            model: segments
            Text {
                required property string line
                text: line
                textFormat: Text.PlainText
                color: "#ffffff"
                font.pixelSize: bar.textSize
                font.bold: true
                leftPadding: bar.textSize * 0.5
                rightPadding: bar.textSize * 0.5
                // The bullet between this segment and the next.
                Text {
                    anchors.left: parent.right
                    anchors.leftMargin: -parent.rightPadding - width / 2
                    anchors.baseline: parent.baseline
                    text: "\u2022"
                    color: "#f0b400"
                    font.pixelSize: bar.textSize
                }
            }
        }
    }

    function segmentWidth(index: int): real {
        const item = repeater.itemAt(index)
        return item === null ? 0 : item.implicitWidth
    }

    // Segments of the current text added on the right until the strip covers the bar.
    function fill() {
        if (bar.ticker.text === "" || bar.width <= 0)
            return
        while (bar.offset + bar.filled < bar.width + bar.textSize) {
            segments.append({ line: bar.ticker.text })
            const added = segmentWidth(segments.count - 1)
            if (added <= 0)
                break
            bar.filled += added
        }
    }

    function measure() {
        let total = 0
        for (let i = 0; i < segments.count; ++i)
            total += segmentWidth(i)
        bar.filled = total
        fill()
    }

    FrameAnimation {
        running: segments.count > 0 && bar.visible
        onTriggered: {
            bar.offset -= bar.pixelsPerSecond * frameTime
            const first = bar.segmentWidth(0)
            if (first > 0 && bar.offset + first <= 0) {
                segments.remove(0)
                bar.offset += first
                bar.filled -= first
                if (segments.count === 0) {  // no text left: the next starts at the left edge
                    bar.offset = 0
                    bar.filled = 0
                }
            }
            bar.fill()
        }
    }

    Connections {
        target: bar.ticker
        function onTextChanged() { bar.fill() }
    }
    onShownInChanged: if (bar.shownIn !== null) bar.ticker.laidOut(bar.shownIn)
    onWidthChanged: fill()
    onTextSizeChanged: measure()
    Component.onCompleted: fill()
}
