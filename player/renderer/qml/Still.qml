// The last frame of a web view, kept on the GPU while the next item loads in its place (the
// low-memory profile's one view, region.py): nothing is read back to the CPU.
//
// Two texture copies: `capture` copies the view; `keeper` (what is shown) copies `capture`, one
// frame later. The view can then go: `capture` goes blank with it, but `keeper` is not live and
// keeps its copy until the next hold.
import QtQuick

Item {
    id: still

    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    property alias sourceItem: capture.sourceItem
    // Between the two copies `capture` is shown itself (`keeper` still holds an older frame).
    property bool copying: false
    anchors.fill: parent
    visible: false

    ShaderEffectSource {
        id: capture
        anchors.fill: parent
        live: false
        hideSource: false
    }
    ShaderEffectSource {
        id: keeper
        anchors.fill: parent
        sourceItem: capture
        live: false
        hideSource: !still.copying
        visible: !still.copying
    }

    // First frame: copy the view; second frame: copy the copy.
    function captureView() {
        copying = true
        capture.scheduleUpdate()
    }
    function keepCopy() {
        copying = false
        keeper.scheduleUpdate()
    }

    Fade { id: fader; target: still }
}
