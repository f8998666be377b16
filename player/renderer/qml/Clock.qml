// A clock: the time as `clock` (zoneitems.py's Clock) writes it, in white on a dark box that
// fills its parent, as large as fits. The text changes once a minute (once a second when the
// format shows seconds): nothing else here redraws the scene.
pragma ComponentBehavior: Bound
import QtQuick

Rectangle {
    id: face

    // A Python object (zoneitems.Clock): `var`, as QML cannot see its type.
    required property var clock
    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    // The window, once the clock has text in it: laid out (painted two frames later).
    readonly property var shownIn: face.clock.text !== "" ? face.Window.window : null

    anchors.fill: parent
    color: "#141414"
    onShownInChanged: if (face.shownIn !== null) face.clock.laidOut(face.shownIn)

    Fade { id: fader; target: face }

    Text {
        id: time
        anchors.fill: parent
        anchors.margins: Math.round(Math.min(face.width, face.height) * 0.08)
        text: face.clock.text
        textFormat: Text.PlainText
        color: "#ffffff"
        font.bold: true
        // Digits of one width: the text does not shift as they change.
        font.features: { "tnum": 1 }
        font.pixelSize: Math.max(8, Math.round(face.height * 0.7))
        fontSizeMode: Text.Fit
        minimumPixelSize: 8
        horizontalAlignment: Text.AlignHCenter
        verticalAlignment: Text.AlignVCenter
    }
}
